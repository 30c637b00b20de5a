"""The tools of the desk pack: a CRM whose tickets live in the ledger's service state."""

from desk import queue_for  # a module next to this file: the pack folder is on sys.path

from crashpoint.fakes.tools import Tool
from crashpoint.protocols import ToolError


def open_ticket(box, args, ref):
    if not args.get("customer_id") or not args.get("subject"):
        raise ToolError(f"crm.openTicket: customer_id and subject are required, got {dict(args)}", retryable=False)
    ticket_id = "tk" + ref[1:]
    box.put_state(f"ticket:{ticket_id}", {"status": "open", "customer_id": args["customer_id"]})
    return {"ticket_id": ticket_id, "status": "open"}


def close_ticket(box, args, ref):
    ticket_id = (args.get("result") or {}).get("ticket_id")
    ticket = box.get_state(f"ticket:{ticket_id}")
    if ticket is None:
        raise ToolError(f"crm.closeTicket: no ticket {ticket_id!r}", retryable=False)
    ticket["status"] = "closed"
    box.put_state(f"ticket:{ticket_id}", ticket)
    return {"ticket_id": ticket_id, "status": "closed"}


def assign_agent(box, args, ref):
    ticket = box.get_state(f"ticket:{args.get('ticket_id')}")
    if ticket is None or ticket["status"] != "open":
        raise ToolError(f"crm.assignAgent: ticket {args.get('ticket_id')!r} is not open", retryable=False)
    return {"ticket_id": args["ticket_id"], "queue": queue_for(args.get("subject", "")), "agent": "ag" + ref[2:8]}


TOOLS = {
    "crm.openTicket": Tool(open_ticket, {"customer_id": "str", "subject": "str"}, "open a support ticket"),
    "crm.closeTicket": Tool(close_ticket, {"result": "{ticket_id}: the open call's result"},
                            "close a ticket (the compensation of crm.openTicket)"),
    "crm.assignAgent": Tool(assign_agent, {"ticket_id": "str", "subject?": "str, picks the queue"},
                            "assign an agent of the ticket's queue"),
}
