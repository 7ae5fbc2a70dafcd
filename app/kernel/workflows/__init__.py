"""Plan mode and the session's task list (Foya's `workflow` package and task
tools): plan workflows and their transitions (`service`), their records and file (`records`),
what plan mode allows and says (`policy`), and the `read_tasks`/`update_tasks` tools (`tasks`).
Errors: `service`."""

from app.kernel.workflows.records import Workflow
from app.kernel.workflows.service import WorkflowApproval, Workflows
from app.kernel.workflows.tasks import task_tools

__all__ = ["Workflow", "WorkflowApproval", "Workflows", "task_tools"]
