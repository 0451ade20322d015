"""ordo's testbed: stand-ins for Kafka and Kubernetes on one machine (test support, shipped for
``ordo sandbox`` and ``ordo testbed up``; not product code).

- ``ordo.testbed.kafka``: Apache Kafka (single-node KRaft) behind a thin fault proxy.
- ``ordo.testbed.kube``: a real Kubernetes API server (etcd, kube-apiserver), no nodes.
- ``ordo.testbed.pods``: local processes as pods.
- ``ordo.testbed.operator``: the ordo operator as a local process.
"""
