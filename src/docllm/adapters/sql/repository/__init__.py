"""``TaskRepository`` over SQLAlchemy Core: MySQL/MariaDB in production, SQLite embedded, one module
per role: ``base`` holds the engine, the retried transaction and the row lookup both roles use;
``store`` the fenced writes (``TaskStore``), ``views`` the read-only listings and figures
(``TaskViews``), ``lanes`` the figures per lane and tenant (``LaneViews``); ``SqlAlchemyTaskRepository``
combines them."""

from __future__ import annotations

from docllm.adapters.sql.repository.base import RepositoryBase
from docllm.adapters.sql.repository.lanes import LaneViewsOps
from docllm.adapters.sql.repository.store import TaskStoreOps, usage_params
from docllm.adapters.sql.repository.views import TaskViewsOps, non_terminal_page

__all__ = ["SqlAlchemyTaskRepository", "non_terminal_page", "usage_params"]


class SqlAlchemyTaskRepository(TaskStoreOps, TaskViewsOps, LaneViewsOps, RepositoryBase):
    """The source of truth: the fenced write store and the view store over one engine."""
