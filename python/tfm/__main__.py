"""python3 -m tfm compile|run|inspect|train|generate ...: tfmc itself."""

import os
import sys

from ._compiler import tfmc_path
from ._errors import CompileError


def main():
    try:
        tfmc = tfmc_path()
    except CompileError as e:
        print(f"python3 -m tfm: {e.message}", file=sys.stderr)
        return 1
    os.execv(tfmc, [tfmc] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
