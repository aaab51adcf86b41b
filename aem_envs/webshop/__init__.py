"""WebShop (Yao et al. 2022): a shopping site with its exact reward, in text and browser modes.

``aem/WebShop-v0`` (:class:`~aem_envs.webshop.env.WebShopEnv`) runs the site in-process;
``aem/WebShopBrowser-v0`` (:class:`~aem_envs.webshop.browser.WebShopBrowserEnv`) serves it on
127.0.0.1 to a headless Chromium. Modules: ``catalog`` (data model), ``data`` (original file
formats, the bundled catalog), ``generate`` (the seeded catalog generator), ``reward``,
``search`` (BM25), ``site`` (routes and templates), ``expert``.
"""

from aem_envs.webshop.catalog import Catalog, Goal, Product
from aem_envs.webshop.env import WebShopEnv

__all__ = ["Catalog", "Goal", "Product", "WebShopEnv"]
