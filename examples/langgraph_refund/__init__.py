"""A refund agent as a LangGraph team writes it, and its chaos tests (see README, "Test your own LangGraph graph")."""
