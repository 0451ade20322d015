"""Workload programs and the checker of their logs, shared by the harness's tests, the sandbox and
the kind end-to-end suite: keyed producers that number each key's records, consumers that log
what they processed in the order they processed it, and a verifier that checks those logs.
"""
