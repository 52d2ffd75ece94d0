"""Tasks and their attempts: the task model, payloads, policies, how an attempt ends (``verdict``), and
the services that move tasks (``attempts``, ``reaper``, ``reconciler``, ``producer``, ``cancel``,
``leftovers``). Modules import from modules (``docllm.domain.tasks.model``), never from this package."""
