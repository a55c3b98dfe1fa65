"""SASL for the broker: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER (unsecured JWTs), sans-IO.

The mechanisms (:mod:`.plain`, :mod:`.scram`, :mod:`.oauthbearer`) turn a client token into the
server's answer or a :class:`~.errors.SaslFailure`; :mod:`.service` reads the per-listener
configuration and starts them; :mod:`.store` keeps the SCRAM credentials in the data directory;
:mod:`.state` is a connection's progress and the gate the server asks before each request. The
SaslHandshake, SaslAuthenticate and SCRAM credential handlers are in
:mod:`kompakt.broker.handlers`.
"""
