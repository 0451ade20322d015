"""ordo's Kubernetes API (``ordo.dev/v1alpha1``): pydantic models that define the CRDs.

``python -m ordo.api [DIR]`` (or ``ordo crds``) writes ``crds/*.yaml`` from these models.
"""

from .common import (
    API_GROUP,
    API_VERSION,
    Condition,
    LabelSelector,
    set_condition,
)
from .kafka import (
    CertificateAndKey,
    CertSecretSource,
    GenericSecretSource,
    KafkaAuthentication,
    KafkaConnection,
    KafkaTls,
    PasswordSecret,
    SecretRef,
)
from .producer_group import (
    MemberStatus,
    PartitionCheckpoint,
    ProducerGroup,
    ProducerGroupSpec,
    ProducerGroupStatus,
)
from .topic_autoscaler import (
    Growth,
    TopicAutoscaler,
    TopicAutoscalerSpec,
    TopicAutoscalerStatus,
)
from .topic_expansion import (
    ExpansionPhase,
    OrderedTopicExpansion,
    OrderedTopicExpansionSpec,
    OrderedTopicExpansionStatus,
)

RESOURCES = (ProducerGroup, OrderedTopicExpansion, TopicAutoscaler)

__all__ = [
    "API_GROUP",
    "API_VERSION",
    "RESOURCES",
    "CertSecretSource",
    "CertificateAndKey",
    "Condition",
    "ExpansionPhase",
    "GenericSecretSource",
    "Growth",
    "KafkaAuthentication",
    "KafkaConnection",
    "KafkaTls",
    "LabelSelector",
    "MemberStatus",
    "OrderedTopicExpansion",
    "OrderedTopicExpansionSpec",
    "OrderedTopicExpansionStatus",
    "PartitionCheckpoint",
    "PasswordSecret",
    "ProducerGroup",
    "ProducerGroupSpec",
    "ProducerGroupStatus",
    "SecretRef",
    "TopicAutoscaler",
    "TopicAutoscalerSpec",
    "TopicAutoscalerStatus",
    "set_condition",
]
