import sys

from kazetts.cli.main import main

sys.exit(main())
