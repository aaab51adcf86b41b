"""The WebShop site: routes and templates (:mod:`.app`), page views for agents (:mod:`.page`)
and the 127.0.0.1 server the browser env points Chromium at (:mod:`.server`)."""
