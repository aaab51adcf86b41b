"""Any aem env over the network: an OpenEnv server (``aem serve``) and a Gymnasium client.

The server (:mod:`aem_envs.remote.server`) puts one Gymnasium env behind each OpenEnv
WebSocket session of ``openenv-core``'s own app; the client (:mod:`aem_envs.remote.client`,
``gym.make("aem_envs:aem/Remote-v0", url=...)``) is itself a Gymnasium env, so code written
for a local env runs unchanged against a remote one. Both need the ``scale`` extra and import
it lazily, so a base install still imports :mod:`aem_envs`.
"""
