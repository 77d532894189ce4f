"""``python -m app.spark INPUT... --output OUT``: the spark-submit entry, run directly."""

import sys

from neardup.app.spark.submit import main

if __name__ == "__main__":
    sys.exit(main())
