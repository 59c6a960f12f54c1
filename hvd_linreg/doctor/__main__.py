"""`python -m hvd_linreg.doctor`: the doctor without the hvd-linreg entry point."""

import sys

from hvd_linreg.doctor import main

sys.exit(main())
