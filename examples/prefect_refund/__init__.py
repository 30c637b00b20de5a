"""A refund flow written as a Prefect team writes it (docs/tutorials/prefect.md, "Test your own Prefect flow")."""
