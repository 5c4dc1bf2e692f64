"""H200 A/B for branch gdn-split-output: the GDN chunk forward with the output fused into the
sequential pass or split into a parallel kernel (SPLIT_OUTPUT), against FLA in the same process:
float64 check, median ms, kernel breakdown, peak memory. Run: python3 tools/ab_gdn_split.py [--fla]"""
import os, sys
import torch, triton
sys.path.insert(0, os.getcwd())
from kernels import harness
from kernels.gdn import study as gs
import kernels.gdn.chunk as ch
dev = torch.device("cuda")
for pas, shape in (("fwd", dict(batch=4, seqlen=8192, heads=16)), ("fwd", dict(batch=1, seqlen=32768, heads=32)),
                   ("fwdbwd", dict(batch=4, seqlen=8192, heads=16))):
    case = {"pass": pas, "dtype": "bfloat16", "head_dim": 128, "num_seqs": shape["batch"], "varlen": False, **shape}
    for name, impl, split in (("fused", "chunk", False), ("split", "chunk", True)) + (
            (("fla", "fla_chunk", None),) if "--fla" in sys.argv else ()):
        try:
            if split is not None:
                ch.SPLIT_OUTPUT = split
            p = gs.prepare(impl, {**case, "impl": impl}, dev)
            ms = triton.testing.do_bench(p.fn, warmup=50, rep=300, return_mode="median")
            kb = harness.kernel_breakdown(p.fn, dev, calls=3, top=6)
            errs = {k: round(v, 5) for k, v in p.extra.items() if "err" in k or "peak" in k}
            print(f"{name:6s} {pas} {shape} {ms:7.3f} ms kernels {sum(e['us'] for e in kb) / 1e3:.3f} ms {errs}", flush=True)
            for e in kb[:4]:
                print(f"      {e['us']:8.1f} us {e['name'][:50]}")
            del p
        except Exception as e:
            print(f"{name} {shape} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
        torch.cuda.empty_cache()
