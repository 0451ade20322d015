"""``python -m ordo.testbed.kube --port 6443 --state-dir DIR [--crds DIR ...]``."""

from __future__ import annotations

import argparse

from .launcher import run_foreground


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m ordo.testbed.kube", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6443)
    parser.add_argument("--state-dir", default=None)
    parser.add_argument(
        "--crds", action="append", default=None, help="CRD folder (repeatable; default: crds/)"
    )
    parser.add_argument("--kubeconfig", default=None, help="where to write the kubeconfig")
    args = parser.parse_args()
    run_foreground(
        host=args.host,
        port=args.port,
        state_dir=args.state_dir,
        crd_dirs=args.crds,
        kubeconfig_path=args.kubeconfig,
    )


if __name__ == "__main__":
    main()
