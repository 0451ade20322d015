"""``python -m ordo.api [DIR]``: write the CRDs (default ``crds/``)."""

import sys
from pathlib import Path

from .crd import write_crds

if __name__ == "__main__":
    for path in write_crds(Path(sys.argv[1] if len(sys.argv) > 1 else "crds")):
        print(path)
