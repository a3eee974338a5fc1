import sys

from wearlab.cli import main

sys.exit(main())
