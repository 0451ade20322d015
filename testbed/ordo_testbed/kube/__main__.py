"""``python -m ordo_testbed.kube --port 6443 --state-dir DIR``: the API server in the foreground."""

from __future__ import annotations

import argparse

from ordo_testbed.kube.apiserver import run_foreground


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m ordo_testbed.kube", description=__doc__)
    parser.add_argument("--port", type=int, default=6443, help="the API server's HTTPS port (0: any free)")
    parser.add_argument("--state-dir", default=None, help="etcd's data, certificates, kubeconfig, logs")
    parser.add_argument("--kubeconfig", default=None, help="where to write the kubeconfig")
    args = parser.parse_args()
    run_foreground(port=args.port, state_dir=args.state_dir, kubeconfig_path=args.kubeconfig)


if __name__ == "__main__":
    main()
