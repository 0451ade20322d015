"""The ordo operator (kopf): reconciles ProducerGroups and OrderedTopicExpansions.

Handlers are thin: they read state, call ordo's pure planners and apply the plan.
"""
