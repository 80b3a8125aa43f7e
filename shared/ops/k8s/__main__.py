"""``python -m shared.ops.k8s``: the same as ``statewise k8s``."""

import sys

from shared.ops.k8s.render import k8s_main

if __name__ == "__main__":
    sys.exit(k8s_main(sys.argv[1:]))
