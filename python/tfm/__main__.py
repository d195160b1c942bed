"""python3 -m tfm compile|run|inspect|train|generate ...: tfmc itself."""

import os
import sys

from ._compiler import tfmc_path


def main():
    tfmc = tfmc_path()
    os.execv(tfmc, [tfmc] + sys.argv[1:])


if __name__ == "__main__":
    main()
