"""A refund flow written as a Temporal team writes it (see README, "Test your own Temporal workflow")."""
