"""ordo's testbed: stand-ins for Kafka and Kubernetes on one machine (test support, shipped for
``ordo sandbox`` and ``ordo testbed up``; not product code).

- ``ordo_testbed.kafka``: Apache Kafka (single-node KRaft) behind a thin fault proxy.
- ``ordo_testbed.kube``: a real Kubernetes API server (etcd, kube-apiserver), no nodes.
- ``ordo_testbed.pods``: local processes as pods.
- ``ordo_testbed.operator``: the ordo operator as a local process.
"""
