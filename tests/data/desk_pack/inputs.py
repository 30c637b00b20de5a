"""The desk pack's input generator: same seed, same input."""


def ticket_input(seed):
    return {"customer_id": f"cus_gen_{seed % 1000}", "subject": "invoice charged twice" if seed % 2 else "login"}
