"""A refund flow written as a DBOS team writes it (see README, "Test your own DBOS app")."""
