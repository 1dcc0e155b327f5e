// A minimal AMD module: the datasource has no custom editors, so the
// frontend only registers the plugin; queries come from provisioned
// dashboards and run in the Go backend.
define(["@grafana/data", "@grafana/runtime"], function (data, runtime) {
  "use strict";
  var plugin = new data.DataSourcePlugin(runtime.DataSourceWithBackend);
  return { plugin: plugin };
});
