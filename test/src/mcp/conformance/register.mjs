// `node --import ./register.mjs`: installs hooks.mjs before the conformance CLI loads.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
