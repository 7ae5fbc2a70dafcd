"""Plan mode and the session's task list (Foya's `workflow` package and task
tools): plan workflows and their transitions (`service`), their records and file (`records`),
what plan mode allows and says (`policy`), and the `read_tasks`/`update_tasks` tools (`tasks`).
Errors: `service`."""

from typing import TYPE_CHECKING

from app.kernel.lazyexports import LazyExports

if TYPE_CHECKING:
    from app.kernel.workflows.records import Workflow
    from app.kernel.workflows.service import WorkflowApproval, Workflows
    from app.kernel.workflows.tasks import task_tools

# Imported on first lookup: nothing reads plan mode at start, and importing one module of a
# package runs its `__init__`.
__getattr__ = LazyExports(
    __name__,
    {
        "app.kernel.workflows.records": ("Workflow",),
        "app.kernel.workflows.service": ("WorkflowApproval", "Workflows"),
        "app.kernel.workflows.tasks": ("task_tools",),
    },
)

__all__ = ["Workflow", "WorkflowApproval", "Workflows", "task_tools"]
