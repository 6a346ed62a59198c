import time

STARTED_NS = time.time_ns()  # Python's start-up ends here (a trial's timeline)

import sys  # noqa: E402

from fwbench.cli import main  # noqa: E402

sys.exit(main(started_ns=STARTED_NS))
