import sys

from fwbench.cli import main

sys.exit(main())
