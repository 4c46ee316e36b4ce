"""Moving records between replicas: the reconciliation state machine (`wire`, `keyset`,
`reconcile`, `initiator`, `responder`), its transports (`local`, `http`) and CAR files (`car`)."""
