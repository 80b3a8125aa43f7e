"""The SparkApplication's main file: ``statewise ARGUMENTS`` (``run APP``) inside the
driver pod that spark-submit starts, with the exit code as the pod's.

spark-submit takes a Python file, not a module, and runs it with this folder first on
sys.path, so it lives in a folder of its own and imports the project as installed in the
image (deploy/k8s/Dockerfile). Nothing else belongs here: what ``statewise run`` does
stays in shared/cli/main.py."""

import sys

from shared.cli.main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
