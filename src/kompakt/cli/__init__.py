"""The ``kompakt`` command line (entry point :func:`kompakt.cli.main.main`).

The command never does linear algebra, so OpenBLAS (loaded with numpy) is told to start one
thread instead of one per core: numpy then imports about 30 ms faster, which is a tenth of
``kompakt serve``'s start, and the broker has no idle BLAS threads. A value the user set wins.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
