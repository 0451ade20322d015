"""ordo's test harness: the real Apache Kafka and kube-apiserver on one machine, fault proxies in
front of them, pods as processes and pytest fixtures (its own distribution, never in the SDK).

- ``ordo_testbed.kafka``: Apache Kafka (single-node KRaft) behind a thin fault proxy.
- ``ordo_testbed.kube``: a real Kubernetes API server (etcd, kube-apiserver), no nodes.
- ``ordo_testbed.cli``: ``ordo testbed up|down``.
- ``ordo_testbed.bench``: ``ordo bench eos`` (KIP-609's exactly-once loop) and ``ordo bench all|<name>``.
- ``ordo_testbed.pods``: local processes as pods.
- ``ordo_testbed.operator``: the ordo operator as a local process.
"""
