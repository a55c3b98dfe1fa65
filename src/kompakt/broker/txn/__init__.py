"""The transaction coordinator: state machine, ``__transaction_state``, markers (KIP-98/447/890)."""
