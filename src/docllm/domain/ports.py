"""Every port, re-exported from the capability that owns it (``docllm.domain.<subject>.ports``;
``EventSink`` is in ``docllm.domain.events``) for code written before the split. New code imports
from the owner; this module goes once no caller is left."""

from docllm.domain.batches.ports import BatchApi as BatchApi
from docllm.domain.batches.ports import BatchLeases as BatchLeases
from docllm.domain.batches.ports import BatchStore as BatchStore
from docllm.domain.events import EventSink as EventSink
from docllm.domain.lanes.ports import LaneViews as LaneViews
from docllm.domain.llm.ports import LlmBreaker as LlmBreaker
from docllm.domain.llm.ports import RateLimiter as RateLimiter
from docllm.domain.llm.ports import SpendBudget as SpendBudget
from docllm.domain.review.ports import DocumentReviewer as DocumentReviewer
from docllm.domain.review.ports import RubricCatalog as RubricCatalog
from docllm.domain.review.ports import review_with as review_with
from docllm.domain.tasks.ports import CancelMarks as CancelMarks
from docllm.domain.tasks.ports import Claims as Claims
from docllm.domain.tasks.ports import Clock as Clock
from docllm.domain.tasks.ports import ClockStepLog as ClockStepLog
from docllm.domain.tasks.ports import DashboardSessions as DashboardSessions
from docllm.domain.tasks.ports import Leadership as Leadership
from docllm.domain.tasks.ports import Leases as Leases
from docllm.domain.tasks.ports import OriginalLeftovers as OriginalLeftovers
from docllm.domain.tasks.ports import QueueInspection as QueueInspection
from docllm.domain.tasks.ports import QueueScan as QueueScan
from docllm.domain.tasks.ports import Recovery as Recovery
from docllm.domain.tasks.ports import TaskLookup as TaskLookup
from docllm.domain.tasks.ports import TaskQueue as TaskQueue
from docllm.domain.tasks.ports import TaskRepository as TaskRepository
from docllm.domain.tasks.ports import TaskStore as TaskStore
from docllm.domain.tasks.ports import TaskViews as TaskViews
from docllm.domain.tasks.ports import WorkerRegistry as WorkerRegistry
