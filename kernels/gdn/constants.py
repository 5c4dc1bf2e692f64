"""Constants shared by the chunked GDN kernels' launches (:mod:`kernels.gdn.chunk`) and the
FLOP counts (:mod:`kernels.gdn.flops`). Importing this module imports nothing."""

#: Tokens per chunk of the chunked algorithm (C): the kernels' block of rows and the
#: size of T = (I + A)^-1.
CHUNK_SIZE = 64
