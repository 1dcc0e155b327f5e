// Command pager-datasource is the backend of burnlab's Grafana datasource
// plugin; Grafana runs it as gpx_burnlab-pager-datasource_<os>_<arch>.
package main

import (
	"os"

	"github.com/grafana/grafana-plugin-sdk-go/backend/datasource"
	"github.com/grafana/grafana-plugin-sdk-go/backend/log"

	"burnlab/grafana/plugin/internal/pager"
)

func main() {
	if err := datasource.Manage(pager.PluginID, pager.NewDatasource, datasource.ManageOpts{}); err != nil {
		log.DefaultLogger.Error(err.Error())
		os.Exit(1)
	}
}
