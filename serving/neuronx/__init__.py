"""transformers-neuronx, shared by the runtimes that serve with it (ray_neuronx, torchserve_neuronx):
the settings derived from a blueprint (tp degree, compile key, environment) and the engine. Runs in
pods; the Neuron SDK is imported only when an engine loads."""
