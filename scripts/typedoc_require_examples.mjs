// typedoc plugin (typedoc.config.mjs): every exported class that is not abstract (the layers)
// must carry an `@example` block in its doc comment. A missing one is a warning, which
// `treatWarningsAsErrors` turns into a failed `npm run docs`.
import {Application, ReflectionKind} from 'typedoc';

/** @param {Application} app */
export function load(app) {
  app.on(Application.EVENT_VALIDATE_PROJECT, (project) => {
    for (const cls of project.getReflectionsByKind(ReflectionKind.Class)) {
      if (cls.flags.isAbstract) continue;
      if (cls.comment?.getTag('@example') == null) {
        app.logger.warn(`${cls.getFriendlyFullName()} (Class) has no @example in its doc comment`);
      }
    }
  });
}
