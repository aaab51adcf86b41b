"""WebShop (Yao et al. 2022): a shopping site with its exact reward, in text and browser modes.

Modules, by role (the same names in every env package):

- :mod:`~aem_envs.webshop.env` — :class:`WebShopEnv`, ``aem/WebShop-v0`` (the site in-process);
  :mod:`~aem_envs.webshop.browser` — :class:`WebShopBrowserEnv`, ``aem/WebShopBrowser-v0``
  (the site served on 127.0.0.1 to a headless Chromium).
- :mod:`~aem_envs.webshop.tasks` — where goals come from: the bundled catalog in ``data/``,
  or a folder of the original files.
- :mod:`~aem_envs.webshop.grading` — WebShop's reward for a purchase, as the original computes it.
- :mod:`~aem_envs.webshop.expert` — the expert, acting from the page in front of it.
- :mod:`~aem_envs.webshop.generate` — the seeded catalog generator of ``data/``
  (``python -m aem_envs.webshop.generate``).
- ``data/`` — the bundled catalog, in the original file formats, gzipped, with its manifest.

Engine modules:

- :mod:`~aem_envs.webshop.catalog` — the data model (products, goals, catalog).
- :mod:`~aem_envs.webshop.records` — the original file formats, read and written raw;
  :mod:`~aem_envs.webshop.products` and :mod:`~aem_envs.webshop.goals` interpret them.
- :mod:`~aem_envs.webshop.search` — BM25 search as the original's Pyserini index ranks.
- :mod:`~aem_envs.webshop.nouns` — the noun taggers the reward's title score uses.
- :mod:`~aem_envs.webshop.site` — the site: routes, templates, the page view.
"""

from aem_envs.webshop.browser import WebShopBrowserEnv
from aem_envs.webshop.env import WebShopEnv

__all__ = ["WebShopBrowserEnv", "WebShopEnv"]
