"""Workload programs and the independent verifier, shared by the testbed tests, the sandbox and
the kind end-to-end suite: keyed producers that number each key's records, consumers that log
what they processed in the order they processed it, and a verifier that checks those logs.
"""
