"""A seeded generator of WebShop-style catalogs, written in the original file formats.

Why generate: the original catalog (1.18M scraped products) cannot be redistributed or
downloaded here, so aem ships a realistic stand-in. Products come in *families*: one brand's
product type in several near-duplicate variants that differ in one attribute, their option
values and their price, so that finding the goal's product takes search *and* choice, as in
the original. Every goal is a human-style instruction naming the product type, some of the
target's attributes (always the one that sets it apart from its siblings) and option values;
the loader appends the original ``, and price lower than X dollars`` text.

Run ``python -m aem_envs.webshop.generate --out DIR`` to write a catalog (the defaults make
the bundled one); :func:`~aem_envs.webshop.generate.build.generate_catalog` gives the same
catalog in memory. Modules: :mod:`~aem_envs.webshop.generate.vocabulary` (the word table,
``vocabulary.json``), :mod:`~aem_envs.webshop.generate.build` (listings, reviews, goals and
the catalog files), ``__main__`` (the command line).
"""
