"""Authorization as Kafka's ``StandardAuthorizer`` does it: ACL bindings, their matching rules,
their durable store, and the per-API checks' shared helpers.

:mod:`.model` holds the data (resource patterns, entries, filters, Kafka's enum codes),
:mod:`.authorizer` the decision (super users, deny wins, literal/wildcard/prefixed patterns,
hosts, implied operations, ``allow.everyone.if.no.acl.found``) and :mod:`.store` the file in the
data directory that keeps ACLs across restarts.
"""
