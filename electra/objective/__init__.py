"""The method of the paper (Clark et al., 2020): dynamic masking (`masking`), sampling the generator's replacements
(`sampling`), the tied generator/discriminator pair (`model`) and the combined loss (`loss`)."""
