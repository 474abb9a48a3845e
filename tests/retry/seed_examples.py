"""The YAML examples of seed 001, verbatim apart from indentation, shared by the tests."""

ML_TRAINING = """
apiVersion: armadaproject.io/v1
kind: RetryPolicy
metadata:
  name: ml-training
spec:
  retryLimit: 5
  defaultAction: Fail
  backoff:
    initialDelay: 0s
  antiAffinity:
    mode: none
  rules:
    - action: Retry
      onConditions:
        - Preempted
        - Evicted
      antiAffinity:
        mode: node
    - action: Retry
      onConditions:
        - OOMKilled
      retryLimit: 3
    - action: Retry
      onExitCodes:
        operator: In
        values: [137]
    - action: Retry
      onFailureCategory: [cuda_error, infiniband_error]
"""


def policy_yaml(name: str, spec: str) -> str:
    """A RetryPolicy document around an indented ``spec`` body."""
    body = "\n".join("  " + line for line in spec.strip("\n").splitlines())
    return (
        f"apiVersion: armadaproject.io/v1\nkind: RetryPolicy\nmetadata:\n  name: {name}\n"
        f"spec:\n{body}\n"
    )


CONTAINER_TARGETING = policy_yaml(
    "targeting",
    """
rules:
  - action: Retry
    containerName: "main"
    onExitCodes:
      operator: In
      values: [137]
  - action: Fail
    containerName: "log-shipper"
    onConditions:
      - OOMKilled
""",
)

DEFAULT_ACTION = policy_yaml(
    "tolerant",
    """
defaultAction: Retry
rules:
  - action: Fail
    onExitCodes:
      operator: In
      values: [2]
""",
)

EXIT_CODES = policy_yaml(
    "exit-codes",
    """
rules:
  - action: Retry
    onExitCodes:
      operator: In
      values: [137, 143]
""",
)

CONDITIONS = policy_yaml(
    "conditions",
    """
rules:
  - action: Retry
    onConditions:
      - OOMKilled
      - Evicted
""",
)

TERMINATION_MESSAGE = policy_yaml(
    "transient",
    """
rules:
  - action: Retry
    containerName: "main"
    onTerminationMessage:
      pattern: ".*TRANSIENT.*"
""",
)

CATEGORIES = policy_yaml(
    "categories",
    """
rules:
  - action: Retry
    onFailureCategory: [cuda_error, infiniband_error]
""",
)

PER_RULE_OVERRIDES = policy_yaml(
    "overrides",
    """
rules:
  - action: Retry
    retryLimit: 3
    antiAffinity:
      mode: node
    backoff:
      initialDelay: 30s
      maxDelay: 5m
      multiplier: 2.0
    onConditions:
      - OOMKilled
""",
)

BACKOFF_LEVELS = policy_yaml(
    "backoff-levels",
    """
backoff:
  initialDelay: 10s
  maxDelay: 5m
  multiplier: 2.0
rules:
  - action: Retry
    onConditions: [Evicted]
    backoff:
      initialDelay: 30s
      maxDelay: 10m
      multiplier: 3.0
  - action: Retry
    onConditions: [OOMKilled]
""",
)

ANTI_AFFINITY = policy_yaml(
    "anti-affinity",
    """
antiAffinity:
  mode: none
rules:
  - action: Retry
    onConditions: [Preempted, Evicted]
    antiAffinity:
      mode: node
  - action: Retry
    onConditions: [OOMKilled]
""",
)

INFRA = policy_yaml(
    "infra",
    """
retryLimit: 10
rules:
  - action: Retry
    onConditions: [Preempted, Evicted]
""",
)

ML_OOM = policy_yaml(
    "ml-training",
    """
retryLimit: 5
rules:
  - action: Retry
    onConditions: [OOMKilled]
    retryLimit: 3
""",
)

SCHEDULER_CONFIG = """
scheduling:
  retryPolicy:
    enabled: true
    globalMaxRetries: 20
    defaultPolicyName: default
    defaultBackoff:
      initialDelay: 0s
      maxDelay: 10m
      multiplier: 2.0
"""

ALL_SEED_POLICIES = [
    ML_TRAINING,
    CONTAINER_TARGETING,
    DEFAULT_ACTION,
    EXIT_CODES,
    CONDITIONS,
    TERMINATION_MESSAGE,
    CATEGORIES,
    PER_RULE_OVERRIDES,
    BACKOFF_LEVELS,
    ANTI_AFFINITY,
    INFRA,
    ML_OOM,
]
