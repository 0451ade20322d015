"""``ordo sandbox``: the whole of ordo on the embedded testbed, while data flows.

A SQLite ``orders`` table in 8 source partitions (KIP-509's example) is copied into the Kafka
topic ``orders`` by a ProducerGroup of member pods (``ordo_sandbox.member``), keyed by customer,
while a writer keeps inserting orders. Gated consumers (``ordo_sandbox.scenario.consumer``) and, when Java
and pyspark are there, the Spark ordered pipeline read it. Meanwhile a member joins, the topic
grows 4 → 8 through an OrderedTopicExpansion, a member is SIGKILLed and another joins. Then an
independent verifier compares the source, what reached Kafka (read_committed) and what every
consumer processed.

Modules: ``source`` (the SQLite table and its writer), ``member`` (the member program),
``stages`` (when each step runs; pure), ``records`` (the independent checker of records in Kafka;
pure core), ``report`` (verdict and report; pure), ``view`` (the live terminal view; pure),
``monitor`` (what the view shows, gathered from the API, Kafka and logs), ``spark`` (the pipeline
job), ``run`` (the orchestration).

``ordo sandbox --autoscale`` plays another scenario on the same pieces: OrderedProducer load
generators (``scenario.ramp_producer``) ramp the rate while a TopicAutoscaler grows the topic by
itself. ``ramp`` (the ramp, the autoscaler's spec, growths and their first reads; pure),
``autoscale_report`` (its verdict and report; pure), ``autoscale`` (its orchestration).
"""
