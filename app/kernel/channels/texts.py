"""What the conversation runtime says in a chat, in the channel's locale (en-US, zh-CN).

Foya's catalogue (its `messages.*.json`, spec §4.6) where it has the text; the rest is ours
(commands and decisions Foya's bots do not have). An unknown locale or key falls back to
en-US, as Foya's lookup does; `{name}` fields are filled with `str.format`.
"""

# ruff: noqa: RUF001  (Chinese texts use full-width punctuation, as Foya's catalogue does)

from __future__ import annotations

EN: dict[str, str] = {
    # Foya's
    "task_stopped": "Stopped the current task.",
    "no_task_to_stop": "There is no active task to stop.",
    "queue_full": "The message queue is full. Try again later.",
    "new_chat": "Started a new chat.",
    "conversation_unbound": (
        "This chat is not connected. Use /new to start a Foya chat, "
        "or send the /bind code shown in Foya."
    ),
    "pairing_usage": "Use /bind CODE to connect this chat.",
    "pairing_failed": "That pairing code is invalid or expired.",
    "pairing_complete": "This chat is now connected to Foya.",
    "unsupported_message": "Only text messages are currently supported.",
    "empty_response": "The task finished without a text response.",
    "request_failed": "Request failed: {error}",
    # ours
    "stranger": (
        "You are not allowed to use this bot. Ask its owner to add your user id {user} "
        "to the channel's allowed users."
    ),
    "help": (
        "Send a message to talk to Foya.\n"
        "/new: start a new chat\n"
        "/stop: stop the current task\n"
        "/status: what this chat's session is doing\n"
        "/bind CODE: connect this chat to a Foya session\n"
        "/help: this text"
    ),
    "status": ("Session: {title}\nModel: {model}\nState: {state}\nQueued messages: {queued}"),
    "state_running": "running a turn",
    "state_idle": "idle",
    "untitled": "New chat",
    "queued": "Queued behind the running task.",
    "thinking": "thinking…",
    "running_tool": "running {tool}…",
    "waiting_approval": "waiting for approval…",
    "waiting_answer": "waiting for your answer…",
    "reply_interrupted": "(The reply was interrupted.)",
    "reply_stopped": "(Stopped.)",
    "approval_asked": "Foya wants to {action} with {tool}:\n{detail}",
    "approve": "Approve",
    "approve_session": "Approve for session",
    "deny": "Deny",
    "approved": "Approved.",
    "approved_for_session": "Approved for this session.",
    "denied": "Denied.",
    "answered": "Answered: {value}",
    "question_answered": "Answered.",
    "question_cancelled": "Cancelled.",
    "answer_in_foya": "(Answer this one in Foya.)",
    "decided": "decided",
    "already_decided": "already decided",
}

ZH: dict[str, str] = {
    "task_stopped": "已停止当前任务。",
    "no_task_to_stop": "当前没有可停止的任务。",
    "queue_full": "消息队列已满，请稍后重试。",
    "new_chat": "已开启新会话。",
    "conversation_unbound": (
        "当前聊天尚未连接。发送 /new 创建 Foya 会话，或发送 Foya 中显示的 /bind 配对码。"
    ),
    "pairing_usage": "请发送 /bind 配对码来连接当前聊天。",
    "pairing_failed": "配对码无效或已过期。",
    "pairing_complete": "当前聊天已连接到 Foya。",
    "unsupported_message": "暂时只支持文本消息。",
    "empty_response": "任务已结束，但没有生成文本回复。",
    "request_failed": "请求失败：{error}",
    "stranger": "你无权使用此机器人。请让它的主人把你的用户 ID {user} 加入频道的允许用户。",
    "help": (
        "发送消息即可与 Foya 对话。\n"
        "/new：开启新会话\n"
        "/stop：停止当前任务\n"
        "/status：查看当前会话的状态\n"
        "/bind 配对码：把当前聊天连接到 Foya 会话\n"
        "/help：显示本帮助"
    ),
    "status": "会话：{title}\n模型：{model}\n状态：{state}\n排队消息：{queued}",
    "state_running": "正在执行任务",
    "state_idle": "空闲",
    "untitled": "新会话",
    "queued": "已排队，等待当前任务结束。",
    "thinking": "思考中…",
    "running_tool": "正在运行 {tool}…",
    "waiting_approval": "等待批准…",
    "waiting_answer": "等待你的回答…",
    "reply_interrupted": "（回复被中断。）",
    "reply_stopped": "（已停止。）",
    "approval_asked": "Foya 想用 {tool} 执行 {action}：\n{detail}",
    "approve": "批准",
    "approve_session": "本会话内批准",
    "deny": "拒绝",
    "approved": "已批准。",
    "approved_for_session": "已在本会话内批准。",
    "denied": "已拒绝。",
    "answered": "已回答：{value}",
    "question_answered": "已回答。",
    "question_cancelled": "已取消。",
    "answer_in_foya": "（请在 Foya 中回答此问题。）",
    "decided": "已决定",
    "already_decided": "已经决定过了",
}

CATALOGUES = {"en-US": EN, "zh-CN": ZH}


class Texts:
    """The texts of one locale."""

    def __init__(self, locale: str) -> None:
        self.catalogue = CATALOGUES.get(locale, EN)

    def __call__(self, key: str, **fields: object) -> str:
        text = self.catalogue.get(key) or EN[key]
        return text.format(**fields) if fields else text
